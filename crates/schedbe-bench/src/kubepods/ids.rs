//! Deterministic pod UIDs and container ids for a spec's pods, so the same
//! spec always builds the same cgroup names.

/// Deterministic ids: FNV-1a, then a splitmix64 finaliser so short names
/// still spread over all bits. Not containerd's ids, only shaped like them.
fn hash64(parts: &[&str], salt: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    for p in parts {
        for b in p.bytes().chain(std::iter::once(0)) {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// A UUID (version 4 layout) derived from the pod name.
pub fn uid_for(name: &str) -> String {
    let hi = hash64(&["pod-uid", name], 1);
    let lo = hash64(&["pod-uid", name], 2);
    let hi = (hi & !0xf000) | 0x4000; // version 4
    let lo = (lo & !(0xc << 60)) | (0x8 << 60); // RFC 4122 variant
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        hi >> 32,
        (hi >> 16) & 0xffff,
        hi & 0xffff,
        lo >> 48,
        lo & 0xffff_ffff_ffff
    )
}

/// A 64-hex-digit container id derived from the pod UID and container name.
pub fn container_id_for(uid: &str, container: &str) -> String {
    (0..4).map(|i| format!("{:016x}", hash64(&["container-id", uid, container], 10 + i))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubepods_ids() {
        let u = uid_for("service1");
        assert_eq!(u, uid_for("service1"));
        assert_ne!(u, uid_for("service2"));
        assert_eq!(u.len(), 36);
        let parts: Vec<&str> = u.split('-').collect();
        assert_eq!(parts.iter().map(|p| p.len()).collect::<Vec<_>>(), [8, 4, 4, 4, 12]);
        assert!(parts[2].starts_with('4') && "89ab".contains(&parts[3][..1]), "{u}");
        let id = container_id_for(&u, "server");
        assert_eq!(id.len(), 64);
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(id, container_id_for(&u, "sidecar"));
        assert_ne!(id, container_id_for(&uid_for("service2"), "server"));
    }
}
