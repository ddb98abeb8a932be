//! reef-vm-agent: the program that runs as `/init` inside a reef microVM, and the protocol
//! reef speaks to it. The guest side (`guest`) mounts what the VM needs, loads the kernel
//! modules of its devices, opens the virtio-serial port named [`protocol::PORT_NAME`] and
//! runs commands reef sends there, one process group each. Only std and nix, so the image
//! builder can link it statically for any x86-64 CPU.

pub mod guest;
pub mod protocol;
