#include <scx/common.bpf.h>
char _license[] SEC("license") = "GPL";
