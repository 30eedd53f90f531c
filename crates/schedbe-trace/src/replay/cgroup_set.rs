//! A set of the requested cgroups (`--cgroup`), as bits: what the per-cgroup
//! figures (cgroup.rs) and the reservation inversion (reservation.rs) share.

/// Bit `i`: requested cgroup `i`.
pub type CgroupSet = u64;

/// The requested cgroups in `set`, lowest first.
pub fn bits(set: CgroupSet) -> impl Iterator<Item = usize> {
    let mut m = set;
    std::iter::from_fn(move || {
        (m != 0).then(|| {
            let g = m.trailing_zeros() as usize;
            m &= m - 1;
            g
        })
    })
}

/// How many cgroups one replay can follow (bits of a [`CgroupSet`]).
pub const MAX_CGROUPS: usize = CgroupSet::BITS as usize;
