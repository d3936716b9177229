package prom

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// ParseText reads Prometheus's text exposition format (what a
// `--metrics-addr` endpoint serves) into a map from each sample's series,
// as it is printed (`herd_env_steps_total`, `herd_scalar{tag="losses/value_loss"}`,
// `herd_env_worker_inference_seconds_bucket{le="0.001"}`), to its value.
// Comment lines are skipped; a line that does not parse is an error.
func ParseText(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		// The value follows the series (whose label values may hold
		// spaces) after the closing brace, or after the name.
		rest := line
		if i := strings.LastIndexByte(line, '}'); i >= 0 {
			rest = line[i+1:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 || len(f) > 2 {
			return nil, fmt.Errorf("metrics: line %d %q: want SERIES VALUE [TIMESTAMP]", n, line)
		}
		series := strings.TrimSpace(line[:len(line)-len(rest)])
		if series == "" { // no labels: the name is the first field
			series, f = f[0], f[1:]
		}
		if len(f) == 0 {
			return nil, fmt.Errorf("metrics: line %d %q: no value", n, line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics: line %d: %w", n, err)
		}
		out[series] = v
	}
	return out, sc.Err()
}

// Scrape fetches url (http://ADDR/metrics) and parses it with ParseText.
func Scrape(ctx context.Context, url string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics: %s: %s", url, resp.Status)
	}
	return ParseText(resp.Body)
}
