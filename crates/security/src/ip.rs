//! IP address classification: which kind of network an address reaches.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The kind of network an IP address belongs to, as far as outbound-request policy cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AddressClass {
    /// A globally routable address: the only class allowed by default.
    Public,
    /// `127.0.0.0/8`, `::1`: this machine.
    Loopback,
    /// RFC 1918 `10/8`, `172.16/12`, `192.168/16` and deprecated IPv6 site-local `fec0::/10`.
    Private,
    /// `169.254.0.0/16` (includes cloud metadata endpoints), `fe80::/10`.
    LinkLocal,
    /// `0.0.0.0`, `::`: connecting to it reaches this machine on Linux.
    Unspecified,
    /// `0.0.0.0/8` other than `0.0.0.0`: "this network".
    ThisNetwork,
    /// `224.0.0.0/4`, `ff00::/8`.
    Multicast,
    /// `255.255.255.255`.
    Broadcast,
    /// Documentation ranges: `192.0.2/24`, `198.51.100/24`, `203.0.113/24`, `2001:db8::/32`.
    Documentation,
    /// Carrier-grade NAT shared space `100.64.0.0/10`.
    SharedCgnat,
    /// Benchmarking range `198.18.0.0/15`.
    Benchmarking,
    /// IETF protocol assignments `192.0.0.0/24`.
    ProtocolAssignment,
    /// IPv6 unique local addresses `fc00::/7`.
    UniqueLocal,
    /// Reserved space: `240.0.0.0/4`, deprecated IPv4-compatible IPv6 `::a.b.c.d`.
    Reserved,
}

impl AddressClass {
    /// Private-network classes: refused by default, allowed when the policy allows private
    /// addresses (for example to reach a service on the same host or LAN).
    pub fn is_private_network(self) -> bool {
        matches!(
            self,
            Self::Loopback
                | Self::Private
                | Self::LinkLocal
                | Self::SharedCgnat
                | Self::UniqueLocal
        )
    }

    /// Stable lower-case name, used in error messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Public => "public",
            Self::Loopback => "loopback",
            Self::Private => "private",
            Self::LinkLocal => "link-local",
            Self::Unspecified => "unspecified",
            Self::ThisNetwork => "this-network",
            Self::Multicast => "multicast",
            Self::Broadcast => "broadcast",
            Self::Documentation => "documentation",
            Self::SharedCgnat => "shared (CGNAT)",
            Self::Benchmarking => "benchmarking",
            Self::ProtocolAssignment => "IETF protocol assignment",
            Self::UniqueLocal => "unique-local",
            Self::Reserved => "reserved",
        }
    }
}

impl fmt::Display for AddressClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Classifies an address. IPv6 addresses that embed an IPv4 address (IPv4-mapped
/// `::ffff:a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`) are classified by the embedded
/// IPv4 address, because that is what a connection actually reaches.
pub fn classify_ip(ip: IpAddr) -> AddressClass {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> AddressClass {
    let [a, b, c, _] = ip.octets();
    if ip.is_unspecified() {
        AddressClass::Unspecified
    } else if a == 0 {
        AddressClass::ThisNetwork
    } else if ip.is_loopback() {
        AddressClass::Loopback
    } else if ip.is_private() {
        AddressClass::Private
    } else if ip.is_link_local() {
        AddressClass::LinkLocal
    } else if ip.is_broadcast() {
        AddressClass::Broadcast
    } else if ip.is_multicast() {
        AddressClass::Multicast
    } else if ip.is_documentation() {
        AddressClass::Documentation
    } else if a == 100 && (b & 0xc0) == 64 {
        AddressClass::SharedCgnat
    } else if a == 198 && (b & 0xfe) == 18 {
        AddressClass::Benchmarking
    } else if a == 192 && b == 0 && c == 0 {
        AddressClass::ProtocolAssignment
    } else if a >= 240 {
        AddressClass::Reserved
    } else {
        AddressClass::Public
    }
}

fn classify_v6(ip: Ipv6Addr) -> AddressClass {
    if let Some(v4) = embedded_v4(ip) {
        return classify_v4(v4);
    }
    let seg = ip.segments();
    if ip.is_unspecified() {
        AddressClass::Unspecified
    } else if ip.is_loopback() {
        AddressClass::Loopback
    } else if seg[0..6] == [0, 0, 0, 0, 0, 0] {
        // Deprecated IPv4-compatible addresses (::a.b.c.d).
        AddressClass::Reserved
    } else if ip.is_multicast() {
        AddressClass::Multicast
    } else if (seg[0] & 0xffc0) == 0xfe80 {
        AddressClass::LinkLocal
    } else if (seg[0] & 0xffc0) == 0xfec0 {
        AddressClass::Private
    } else if (seg[0] & 0xfe00) == 0xfc00 {
        AddressClass::UniqueLocal
    } else if seg[0] == 0x2001 && seg[1] == 0x0db8 {
        AddressClass::Documentation
    } else {
        AddressClass::Public
    }
}

/// The IPv4 address an IPv6 address forwards to, for the translation schemes that embed one.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    let seg = ip.segments();
    let o = ip.octets();
    // NAT64 well-known prefix 64:ff9b::/96.
    if seg[0..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(Ipv4Addr::new(o[12], o[13], o[14], o[15]));
    }
    // 6to4 2002:AABB:CCDD::/48.
    if seg[0] == 0x2002 {
        return Some(Ipv4Addr::new(o[2], o[3], o[4], o[5]));
    }
    None
}
