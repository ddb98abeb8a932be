//! Tests for `classify_ip`.

use reef_security::{AddressClass, classify_ip};
use std::net::IpAddr;

fn class(s: &str) -> AddressClass {
    classify_ip(s.parse::<IpAddr>().unwrap())
}

#[test]
fn ipv4_classes() {
    let cases = [
        ("8.8.8.8", AddressClass::Public),
        ("1.1.1.1", AddressClass::Public),
        ("127.0.0.1", AddressClass::Loopback),
        ("127.255.0.9", AddressClass::Loopback),
        ("10.1.2.3", AddressClass::Private),
        ("172.16.0.1", AddressClass::Private),
        ("172.31.255.255", AddressClass::Private),
        ("172.32.0.1", AddressClass::Public),
        ("192.168.1.1", AddressClass::Private),
        ("169.254.169.254", AddressClass::LinkLocal),
        ("0.0.0.0", AddressClass::Unspecified),
        ("0.1.2.3", AddressClass::ThisNetwork),
        ("224.0.0.1", AddressClass::Multicast),
        ("255.255.255.255", AddressClass::Broadcast),
        ("192.0.2.1", AddressClass::Documentation),
        ("198.51.100.7", AddressClass::Documentation),
        ("203.0.113.9", AddressClass::Documentation),
        ("100.64.0.1", AddressClass::SharedCgnat),
        ("100.127.255.255", AddressClass::SharedCgnat),
        ("100.128.0.1", AddressClass::Public),
        ("198.18.0.1", AddressClass::Benchmarking),
        ("198.19.255.1", AddressClass::Benchmarking),
        ("192.0.0.8", AddressClass::ProtocolAssignment),
        ("240.0.0.1", AddressClass::Reserved),
    ];
    for (ip, expected) in cases {
        assert_eq!(class(ip), expected, "{ip}");
    }
}

#[test]
fn ipv6_classes() {
    let cases = [
        ("2606:4700:4700::1111", AddressClass::Public),
        ("::1", AddressClass::Loopback),
        ("::", AddressClass::Unspecified),
        ("fe80::1", AddressClass::LinkLocal),
        ("fc00::1", AddressClass::UniqueLocal),
        ("fd12:3456::1", AddressClass::UniqueLocal),
        ("fec0::1", AddressClass::Private),
        ("ff02::1", AddressClass::Multicast),
        ("2001:db8::1", AddressClass::Documentation),
        ("::7f00:1", AddressClass::Reserved),
    ];
    for (ip, expected) in cases {
        assert_eq!(class(ip), expected, "{ip}");
    }
}

#[test]
fn ipv6_embedding_ipv4_is_classified_by_the_embedded_address() {
    assert_eq!(class("::ffff:127.0.0.1"), AddressClass::Loopback);
    assert_eq!(class("::ffff:10.0.0.1"), AddressClass::Private);
    assert_eq!(class("::ffff:169.254.169.254"), AddressClass::LinkLocal);
    assert_eq!(class("::ffff:8.8.8.8"), AddressClass::Public);
    assert_eq!(class("64:ff9b::7f00:1"), AddressClass::Loopback);
    assert_eq!(class("64:ff9b::808:808"), AddressClass::Public);
    assert_eq!(class("2002:c0a8:0101::1"), AddressClass::Private);
}

#[test]
fn private_network_classes() {
    assert!(AddressClass::Loopback.is_private_network());
    assert!(AddressClass::UniqueLocal.is_private_network());
    assert!(!AddressClass::Public.is_private_network());
    assert!(!AddressClass::Multicast.is_private_network());
    assert!(!AddressClass::Unspecified.is_private_network());
}
