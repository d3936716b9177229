package sumtree_test

import (
	"fmt"

	"herd/internal/rng"
	"herd/replay/sumtree"
)

func ExampleTree() {
	t, err := sumtree.New(6, 4) // 6 slots, fanout 4
	if err != nil {
		panic(err)
	}
	t.SetBatch([]int{0, 1, 2, 3, 4, 5}, []float64{1, 0, 3, 0, 4, 2})
	fmt.Println("total", t.Total())
	// Prefix-sum search: masses [0,1) → 0, [1,4) → 2, [4,8) → 4, [8,10) → 5.
	fmt.Println(t.FindTo(make([]int, 4), []float64{0.5, 3.9, 4, 9.99}))
	t.Set(4, 0) // delete slot 4
	dst := t.SampleTo(make([]int, 8), rng.New(1, "example", 0))
	for _, i := range dst {
		if i == 1 || i == 3 || i == 4 {
			fmt.Println("drew a zero-priority slot")
		}
	}
	fmt.Println("total", t.Total())
	// Output:
	// total 10
	// [0 2 4 5]
	// total 6
}
