package sumtree

import "unsafe"

func unsafePointer(s []float64) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(s)) }
