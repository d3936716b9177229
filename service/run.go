package service

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"herd/metrics/prom"
)

// ServeOptions are what every herd server (`herd serve env|replay`) takes.
type ServeOptions struct {
	// Addr is the listen address; a missing host means 127.0.0.1 (Listen).
	Addr string
	// TLS: a certificate enables TLS, a client CA mutual TLS.
	TLS TLSFiles
	// MaxMessageMB bounds a message accepted or sent, MiB (> 0).
	MaxMessageMB int
	// MetricsAddr, when set, serves Registry at http://MetricsAddr/metrics
	// for Prometheus (a port alone binds 127.0.0.1).
	MetricsAddr string
	// Registry holds the server's collectors; Registerer makes it.
	Registry *prometheus.Registry
}

// Registerer returns the registry --metrics-addr serves, made on first
// use, or nil without --metrics-addr (no collector is then registered).
func (o *ServeOptions) Registerer() prometheus.Registerer {
	if o.MetricsAddr == "" {
		return nil
	}
	if o.Registry == nil {
		o.Registry = prom.NewRegistry()
	}
	return o.Registry
}

// Run listens on o.Addr, serves what register adds to the gRPC server and
// says so on w, until ctx ends (Ctrl-C). A stop by ctx is an error
// wrapping ctx's cause (context.Canceled: a clean interruption), so that
// a caller with more to save can still fail.
func Run(ctx context.Context, w io.Writer, what string, o ServeOptions, register func(*grpc.Server)) error {
	if o.MaxMessageMB <= 0 {
		return fmt.Errorf("serve: --max-message-mb %d, want > 0", o.MaxMessageMB)
	}
	conf, err := o.TLS.ServerConfig()
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	var msrv *prom.Server
	if o.MetricsAddr != "" {
		if o.Registry == nil {
			o.Registry = prom.NewRegistry()
		}
		if msrv, err = prom.ServeRegistry(o.MetricsAddr, o.Registry); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		defer msrv.Close()
	}
	lis, err := Listen(o.Addr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	g := grpc.NewServer(ServerOptions(conf, o.MaxMessageMB<<20)...)
	register(g)
	mode := "plaintext"
	if conf != nil {
		mode = "TLS"
		if conf.ClientCAs != nil {
			mode = "mutual TLS"
		}
	}
	fmt.Fprintf(w, "herd: serving %s on %s (%s)\n", what, lis.Addr(), mode)
	if msrv != nil {
		fmt.Fprintf(w, "herd: metrics for Prometheus at http://%s/metrics\n", msrv.Addr())
	}
	if err := Serve(ctx, g, lis, 5*time.Second); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if ctx.Err() != nil {
		// Stopped by Ctrl-C or SIGTERM: exit 130, unless the caller has
		// more to save and fails at it.
		return fmt.Errorf("serve: stopped: %w", context.Cause(ctx))
	}
	return nil
}
