//! What occupies a CPU in the replay: the task, its tier and requested
//! cgroups as of its switch-in, and since when. The CPU state, the
//! accounting and the timeline's run segments all read it.

use super::{CgroupSet, Pid, Tier};

#[derive(Clone, Copy, Debug)]
pub(super) struct Occ {
    pub(super) pid: Pid,
    pub(super) tier: Tier,
    pub(super) since: u64,
    /// Requested cgroups the task is in, as of its switch-in.
    pub(super) cgroups: CgroupSet,
}
