// Package prom is herd's Prometheus side: the endpoints of `--metrics-addr`
// on herd train, launch, worker and serve, and the reading back of one.
//
// Live is a prometheus.Collector (herd_env_steps_total,
// herd_episodes_total, herd_steps_per_second, herd_episode_return_mean, …
// and herd_scalar{tag="losses/…"}) that a metrics.Recorder fills as a
// metrics.RowSink (metrics.Options.Live); Serve exposes it at
// http://ADDR/metrics. Other processes put their own collectors
// (worker.EnvMetrics, worker.PolicyMetrics, the env and replay servers',
// persist's) on a NewRegistry (which adds the Go runtime's and the
// process's) and serve it with ServeRegistry; `herd launch` gives its k-th
// worker the port OffsetAddr(addr, k). A port alone binds 127.0.0.1.
// ParseText and Scrape read an endpoint back (tests, tools).
// docs/guide/metrics.md lists every metric per process;
// deploy/grafana/herd.json is a dashboard over them.
//
// It sits beside package metrics, which it imports and which does not
// import it: the algorithms record rows without compiling in the
// Prometheus client; executors and commands serve them.
package prom
