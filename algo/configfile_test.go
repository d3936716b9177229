package algo

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReadConfigBounded: a config path that is a device, a FIFO, a
// directory or a file over 1 MiB is refused at once with a clear error;
// a small regular file is read whole.
func TestReadConfigBounded(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok.yaml")
	if err := os.WriteFile(ok, []byte("algo: ppo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadConfig(ok); err != nil || string(b) != "algo: ppo\n" {
		t.Fatalf("small file: %q %v", b, err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, make([]byte, MaxConfigBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{big: "more than 1048576", dir: "is a directory"}
	addSpecialFiles(t, dir, cases)
	for path, want := range cases {
		done := make(chan error, 1)
		go func() {
			_, err := ReadConfig(path)
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, ErrConfigFile) || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v, want ErrConfigFile saying %q", path, err, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: ReadConfig did not return", path)
		}
	}
	if _, err := ReadConfig(filepath.Join(dir, "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}
