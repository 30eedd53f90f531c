#include <scx/common.bpf.h>
char _license[] SEC("license") = "GPL";
UEI_DEFINE(uei);
s32 BPF_STRUCT_OPS(schedbe_select_cpu, struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{ bool is_idle = false; return scx_bpf_select_cpu_dfl(p, prev_cpu, wake_flags, &is_idle); }
void BPF_STRUCT_OPS(schedbe_exit, struct scx_exit_info *ei) { UEI_RECORD(uei, ei); }
SCX_OPS_DEFINE(schedbe_ops, .select_cpu = (void *)schedbe_select_cpu, .exit = (void *)schedbe_exit, .name = "schedbe");
