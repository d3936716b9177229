package prom

import (
	"encoding/csv"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"herd/metrics"
	"herd/metrics/tfevents"
)

// The event file holds, per row, the same values as metrics.csv under the
// same names (charts/… for the episode columns, the declared scalars as
// they are), and Live serves them to a Prometheus scrape.
func TestEventsAndLiveMatchMetricsCSV(t *testing.T) {
	dir := t.TempDir()
	live := NewLive()
	srv, err := Serve("127.0.0.1:0", live)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	r, err := metrics.NewRecorder(metrics.Options{Dir: dir, Algo: "ppo", Env: "CartPole-v1", Seed: 3, TotalSteps: 3000,
		LogEvery: 1000, Scalars: []string{"losses/value_loss", "charts/learning_rate"}, Live: live})
	if err != nil {
		t.Fatal(err)
	}
	scrape := func() string {
		t.Helper()
		resp, err := http.Get("http://" + srv.Addr() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	for step := int64(500); step <= 3000; step += 500 {
		r.Episode(step, float64(step)/100, int(step/100))
		r.Scalar("losses/value_loss", 1/float64(step))
		r.Step(step)
		if step == 1000 {
			s := scrape()
			for _, want := range []string{"herd_env_steps_total 1000", "herd_episodes_total 2", `herd_scalar{tag="losses/value_loss"} 0.001`,
				`herd_run_info{algo="ppo",env="CartPole-v1",seed="3"} 1`, "herd_episode_return_mean 7.5"} {
				if !strings.Contains(s, want) {
					t.Errorf("scrape at step 1000 lacks %q:\n%s", want, s)
				}
			}
			if strings.Contains(s, "learning_rate") {
				t.Error("a scalar never set was scraped")
			}
		}
	}
	if s := scrape(); !strings.Contains(s, "herd_env_steps_total 3000") || !strings.Contains(s, "herd_episodes_total 6") {
		t.Errorf("scrape at step 3000 did not move:\n%s", s)
	}
	if _, err := r.Close(false); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "metrics.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	ev, err := tfevents.ReadFile(filepath.Join(dir, metrics.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, c := range rows[0] {
		col[c] = i
	}
	for tag, column := range map[string]string{"losses/value_loss": "losses/value_loss", "charts/return_mean_100": "return_mean_100",
		"charts/episodes": "episodes", "charts/length_mean_100": "length_mean_100"} {
		pts := ev[tag]
		if len(pts) != len(rows)-1 {
			t.Fatalf("%s: %d events for %d metrics.csv rows", tag, len(pts), len(rows)-1)
		}
		for i, p := range pts {
			step, _ := strconv.ParseInt(rows[i+1][0], 10, 64)
			want, _ := strconv.ParseFloat(rows[i+1][col[column]], 64)
			if p.Step != step || float32(p.Value) != float32(want) {
				t.Errorf("%s row %d: event (%d, %v), metrics.csv (%d, %v)", tag, i, p.Step, p.Value, step, want)
			}
		}
	}
	if _, ok := ev["charts/learning_rate"]; ok {
		t.Error("a scalar never set was written")
	}
}
