package learntest

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"testing"

	"herd/algo"
	"herd/nn"
)

// Bits trains every run listed in the fixture file and checks that
// model.safetensors and metrics.csv (wall-clock columns aside) have the
// recorded sha256s: the same bits as the code that recorded them. Each
// line of the file is
//
//	<model sha256> <metrics sha256> <herd train flags: --env --seed --steps --set k=v …>
//
// (# starts a comment). The sums depend on the matrix kernels, so the test
// skips on a machine whose default Gemm does not give the bits of the one
// that recorded them (gemm, e.g. "native-avx2"; see nn.BitsName).
func Bits(t *testing.T, spec algo.Spec, fixture, gemm string) {
	t.Helper()
	if g := nn.BitsName(nn.DefaultGemm()); g != gemm {
		t.Skipf("the fixture's sums are for the %s kernels; this machine runs %s", gemm, g)
	}
	f, err := os.Open(fixture)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	runs := 0
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 3 {
			t.Fatalf("fixture line %q: want two sums and flags", line)
		}
		res := resolveFlags(t, spec, fields[2:])
		csv, model := TrainFiles(t, res)
		gotModel, gotCSV := sum(WithoutRunMetadata(t, model)), sum([]byte(csv))
		if gotModel != fields[0] || gotCSV != fields[1] {
			t.Errorf("%s: model %s, metrics %s; the fixture has %s, %s", strings.Join(fields[2:], " "), gotModel, gotCSV, fields[0], fields[1])
		}
		runs++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if runs == 0 {
		t.Fatalf("%s lists no runs", fixture)
	}
}

// WithoutRunMetadata re-encodes a checkpoint without the run metadata
// (herd.algo, herd.env, the spaces) that TrainRun adds, which is what the
// model file held before checkpoints carried it: the tensors and their
// layout are the bits that must not change.
func WithoutRunMetadata(t *testing.T, model []byte) []byte {
	t.Helper()
	ck, err := nn.ReadSafetensors(bytes.NewReader(model))
	if err != nil {
		t.Fatal(err)
	}
	for k := range ck.Metadata {
		if strings.HasPrefix(k, "herd.") {
			delete(ck.Metadata, k)
		}
	}
	var b bytes.Buffer
	if err := nn.WriteSafetensors(&b, ck.Tensors, ck.Metadata); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// resolveFlags resolves the `herd train` flags --env, --seed, --steps and
// --set of a fixture line for spec.
func resolveFlags(t *testing.T, spec algo.Spec, args []string) *algo.Resolved {
	t.Helper()
	ov := algo.Overrides{Algo: &spec.Name}
	for i := 0; i+1 < len(args); i += 2 {
		v := args[i+1]
		switch args[i] {
		case "--env":
			ov.Env = &v
		case "--seed":
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			ov.Seed = &n
		case "--steps":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			ov.Steps = &n
		case "--set":
			ov.Set = append(ov.Set, v)
		default:
			t.Fatalf("fixture flag %q: want --env, --seed, --steps or --set", args[i])
		}
	}
	if len(args)%2 != 0 {
		t.Fatalf("fixture flags %v: a flag without a value", args)
	}
	res, err := algo.Resolve(nil, []algo.Spec{spec}, ov)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
