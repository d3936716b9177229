package sumtree

import "unsafe"

func unsafePointer[F leaf](s []F) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(s)) }
