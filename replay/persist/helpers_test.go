package persist_test

import "os"

func tempDir() (string, func()) {
	d, err := os.MkdirTemp("", "persist-example-")
	if err != nil {
		panic(err)
	}
	return d, func() { os.RemoveAll(d) }
}
