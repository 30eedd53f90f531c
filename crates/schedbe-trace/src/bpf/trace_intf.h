#ifndef __SCHEDBE_TRACE_INTF_H
#define __SCHEDBE_TRACE_INTF_H
enum trace_consts { TRACE_PLACEHOLDER = 1 };
#endif
