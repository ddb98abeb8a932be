//! After a restore from a snapshot: every VM restored from one snapshot starts with the same
//! kernel random state and the clock of the moment it was taken. reef's fresh seed is mixed
//! into the random pool and the kernel made to reseed its generator from it at once, and the
//! clock is set to the host's.

#![allow(
    unsafe_code,
    reason = "the reseed is an ioctl on /dev/urandom; see the SAFETY note"
)]

use nix::sys::time::TimeSpec;
use nix::time::{ClockId, clock_settime};
use std::fs::OpenOptions;
use std::io::{self, Write as _};
use std::os::fd::AsRawFd as _;
use std::time::Duration;

// RNDRESEEDCRNG: reseed the kernel's generator from its input pool now (Linux 4.17+).
nix::ioctl_none!(reseed_crng, b'R', 0x07);

pub(super) fn resumed(seed: &[u8], unix_nanos: u64) -> io::Result<()> {
    let mut urandom = OpenOptions::new().write(true).open("/dev/urandom")?;
    urandom.write_all(seed)?;
    // SAFETY: an argument-less ioctl on a descriptor open for the whole call.
    unsafe { reseed_crng(urandom.as_raw_fd()) }
        .map_err(|e| io::Error::other(format!("reseed the random generator: {e}")))?;
    let now = TimeSpec::from_duration(Duration::from_nanos(unix_nanos));
    clock_settime(ClockId::CLOCK_REALTIME, now)
        .map_err(|e| io::Error::other(format!("set the clock: {e}")))
}
