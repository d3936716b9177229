// Command tfcurve draws the learning curve of a herd run from its
// TensorBoard event file, read back with herd/metrics/tfevents: the
// charts/return_mean_100 scalar against env steps.
//
//	go run ./examples/tfcurve RUN_DIR OUT.png
//
// docs/guide/tensorboard-curve.png is drawn this way from a `herd train`
// run (docs/guide/metrics.md).
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"herd/metrics"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "tfcurve:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("usage: tfcurve RUN_DIR OUT.png")
	}
	events := filepath.Join(args[0], metrics.EventsFile)
	title := "return (mean of last 100) from " + filepath.Join(filepath.Base(args[0]), metrics.EventsFile)
	if err := metrics.EventsCurve(events, args[1], title); err != nil {
		return err
	}
	fmt.Printf("wrote %s from %s\n", args[1], events)
	return nil
}
