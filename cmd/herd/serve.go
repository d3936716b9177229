package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"herd/service"
	"herd/service/envsvc"
)

// serveFlags are the flags every `herd serve` command shares.
type serveFlags struct {
	addr   string
	tls    service.TLSFiles
	maxMsg int
}

func (f *serveFlags) register(cmd *cobra.Command, defAddr string) {
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", defAddr, "listen address; a missing host means 127.0.0.1 (say 0.0.0.0:PORT to serve other machines)")
	fl.StringVar(&f.tls.Cert, "tls-cert", "", "server certificate (PEM); enables TLS")
	fl.StringVar(&f.tls.Key, "tls-key", "", "server private key (PEM)")
	fl.StringVar(&f.tls.CA, "tls-client-ca", "", "CA (PEM) that client certificates must chain to; enables mutual TLS")
	fl.IntVar(&f.maxMsg, "max-message-mb", service.MaxMessageBytes>>20, "largest message accepted or sent, MiB")
}

// run serves what register adds until the command's context ends (Ctrl-C).
func (f *serveFlags) run(cmd *cobra.Command, what string, register func(*grpc.Server)) error {
	if f.maxMsg <= 0 {
		return fmt.Errorf("serve: --max-message-mb %d, want > 0", f.maxMsg)
	}
	conf, err := f.tls.ServerConfig()
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	lis, err := service.Listen(f.addr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	g := grpc.NewServer(service.ServerOptions(conf, f.maxMsg<<20)...)
	register(g)
	mode := "plaintext"
	if conf != nil {
		mode = "TLS"
		if conf.ClientCAs != nil {
			mode = "mutual TLS"
		}
	}
	fmt.Fprintf(cmd.OutOrStdout(), "herd: serving %s on %s (%s)\n", what, lis.Addr(), mode)
	return service.Serve(cmd.Context(), g, lis, 5*time.Second)
}

func newServeCmd() *cobra.Command {
	serve := &cobra.Command{
		Use:   "serve",
		Short: "serve environments or a replay store over gRPC (protocol herd.v1)",
	}
	serve.AddCommand(newServeEnvCmd())
	return serve
}

func newServeEnvCmd() *cobra.Command {
	var f serveFlags
	var maxEnvs int
	cmd := &cobra.Command{
		Use:   "env",
		Short: "serve herd's environments; train against them with --env grpc://HOST:PORT/ID",
		Long: `env serves every env id herd knows (CartPole-v1, Pendulum-v1, ...) with the
herd.v1 EnvService protocol (proto/herd/v1/env.proto). A client opens a session
of N envs and steps them with one message per batch of N actions:

  herd train --algo ppo --env grpc://127.0.0.1:7000/CartPole-v1

With --tls-cert/--tls-key clients connect with grpcs://...?ca=CA.pem; with
--tls-client-ca they must also present a certificate (&cert=...&key=...).`,
		Example: `  herd serve env --addr 127.0.0.1:7000
  herd serve env --addr 0.0.0.0:7000 --tls-cert srv.pem --tls-key srv.key --tls-client-ca ca.pem`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.run(cmd, "herd envs", envsvc.New(envsvc.Config{MaxEnvs: maxEnvs}).Register)
		},
	}
	f.register(cmd, "127.0.0.1:7000")
	cmd.Flags().IntVar(&maxEnvs, "max-envs", envsvc.DefaultMaxEnvs, "most envs one session may open")
	return cmd
}
