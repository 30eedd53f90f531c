#ifndef __SCHEDBE_INTF_H
#define __SCHEDBE_INTF_H
enum consts { SCHEDBE_PLACEHOLDER = 1 };
#endif
