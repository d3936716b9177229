package prom

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"herd/metrics"
)

// Live holds the latest metrics row of a run for Prometheus: a
// prometheus.Collector that the Recorder updates at every metrics.csv row
// (a metrics.RowSink in metrics.Options.Live) and a scrape reads from
// another goroutine.
//
// Metrics: herd_env_steps_total and herd_episodes_total (counters),
// herd_steps_per_second, herd_episode_return_mean, herd_episode_return_std,
// herd_episode_length_mean (over the last 100 episodes),
// herd_episode_return_recent (episodes since the previous row), and
// herd_scalar{tag="losses/value_loss"} for each scalar the algorithm
// declares, all gauges; herd_run_info{algo,env,seed} is 1. A value not known
// yet (no episode finished) is left out of the scrape.
type Live struct {
	mu       sync.Mutex // guards the fields below: one writer (the training goroutine), scrapes read
	algo     string
	env      string
	seed     uint64
	tags     []string
	step     int64
	episodes int64
	vals     []float64
}

// NewLive returns an empty Live; a Recorder fills it.
func NewLive() *Live { return &Live{} }

var (
	descSteps    = prometheus.NewDesc("herd_env_steps_total", "Environment steps taken by the run.", nil, nil)
	descEpisodes = prometheus.NewDesc("herd_episodes_total", "Episodes finished.", nil, nil)
	descInfo     = prometheus.NewDesc("herd_run_info", "The run: algorithm, env and seed.", []string{"algo", "env", "seed"}, nil)
	descScalar   = prometheus.NewDesc("herd_scalar", "An algorithm scalar at the last metrics row, by its metrics.csv tag.", []string{"tag"}, nil)
	// The gauges of metrics.BaseTags, in order, after sps and episodes.
	descBase = map[string]*prometheus.Desc{
		"charts/sps":             prometheus.NewDesc("herd_steps_per_second", "Environment steps per second since the start.", nil, nil),
		"charts/return_mean_100": prometheus.NewDesc("herd_episode_return_mean", "Mean return of the last 100 episodes.", nil, nil),
		"charts/return_std_100":  prometheus.NewDesc("herd_episode_return_std", "Standard deviation of the return of the last 100 episodes.", nil, nil),
		"charts/length_mean_100": prometheus.NewDesc("herd_episode_length_mean", "Mean length of the last 100 episodes.", nil, nil),
		"charts/return_recent":   prometheus.NewDesc("herd_episode_return_recent", "Mean return of the episodes since the previous metrics row.", nil, nil),
	}
)

// Describe implements prometheus.Collector.
func (l *Live) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSteps, descEpisodes, descInfo, descScalar} {
		ch <- d
	}
	for _, d := range descBase {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (l *Live) Collect(ch chan<- prometheus.Metric) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tags == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(descInfo, prometheus.GaugeValue, 1, l.algo, l.env, strconv.FormatUint(l.seed, 10))
	ch <- prometheus.MustNewConstMetric(descSteps, prometheus.CounterValue, float64(l.step))
	ch <- prometheus.MustNewConstMetric(descEpisodes, prometheus.CounterValue, float64(l.episodes))
	for i, tag := range l.tags {
		if i >= len(l.vals) || math.IsNaN(l.vals[i]) {
			continue
		}
		if d, ok := descBase[tag]; ok {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, l.vals[i])
		} else if i >= len(metrics.BaseTags()) {
			ch <- prometheus.MustNewConstMetric(descScalar, prometheus.GaugeValue, l.vals[i], tag)
		}
	}
}

// Start implements metrics.RowSink: the run's header and its tags.
func (l *Live) Start(algo, env string, seed uint64, tags []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.algo, l.env, l.seed, l.tags = algo, env, seed, tags
	l.vals = l.vals[:0]
}

// Row implements metrics.RowSink: the latest row.
func (l *Live) Row(step, episodes int64, vals []float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.step, l.episodes = step, episodes
	l.vals = append(l.vals[:0], vals...)
}

// Server is a running Prometheus endpoint.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan error
}

// Serve exposes l (and the Go runtime's and the process's metrics) at
// http://addr/metrics, as ServeRegistry does.
func Serve(addr string, l *Live) (*Server, error) {
	reg := NewRegistry()
	if err := reg.Register(l); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return ServeRegistry(addr, reg)
}

// NewRegistry returns a registry holding the Go runtime's (go_…) and the
// process's (process_…) collectors, for a process to add its own to and
// hand to ServeRegistry.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// ServeRegistry exposes what reg gathers at http://addr/metrics: the
// endpoint of `--metrics-addr` on herd train, launch, worker and serve.
// An addr without a host (":9090") binds 127.0.0.1, so that nothing is
// exposed beyond the machine unless a host is named. The endpoint serves
// counters, gauges and histograms only: no URL, credential or path.
func ServeRegistry(addr string, reg prometheus.Gatherer) (*Server, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: --metrics-addr %q: %w", addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	s := &Server{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, ln: ln, done: make(chan error, 1)}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// OffsetAddr returns addr with its port moved up by k: the endpoint of the
// k-th process `herd launch --metrics-addr` starts after the learner
// (policy workers, then env workers). Port 0 stays 0 (every process picks
// a free port).
func OffsetAddr(addr string, k int) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("metrics: --metrics-addr %q: %w", addr, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return "", fmt.Errorf("metrics: --metrics-addr %q: port %q is not a number in 0…65535", addr, port)
	}
	if p == 0 {
		return addr, nil
	}
	if p+k > 65535 {
		return "", fmt.Errorf("metrics: --metrics-addr %q: %d more ports do not fit below 65536", addr, k)
	}
	return net.JoinHostPort(host, strconv.Itoa(p+k)), nil
}

// Addr is the address the endpoint listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the endpoint and waits for its goroutine.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if serr := <-s.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// RegisterAll registers every collector on reg, or none: on the first
// refusal it unregisters those it registered and returns the error.
func RegisterAll(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, d := range cs[:i] {
				reg.Unregister(d)
			}
			return err
		}
	}
	return nil
}
