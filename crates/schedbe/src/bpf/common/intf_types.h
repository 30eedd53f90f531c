/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The kernel's integer types for every intf.h: the BPF side has them from
 * vmlinux.h, userspace's bindgen run from here.
 */
#ifndef __SCHEDBE_INTF_TYPES_H
#define __SCHEDBE_INTF_TYPES_H

#ifndef __VMLINUX_H__
typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;
#endif

#endif /* __SCHEDBE_INTF_TYPES_H */
