// Package service holds what herd's gRPC services share: transport security
// (TLS, optionally mutual), message size limits, listen-address defaults and
// the protocol version. The services themselves live in service/envsvc
// (remote environments) and service/replaysvc (the persistent replay store);
// their wire protocol is proto/herd/v1 (package herdv1), and the Go client
// for remote envs is package env itself (env.Make("grpc://host:port/ID")).
//
// # Security defaults
//
// Servers listen on 127.0.0.1 unless an address names another host
// (Listen). TLS is on when a certificate is given; with a client CA every
// client must present a certificate that CA signed (mTLS). Every message
// is bounded by MaxMessageBytes unless the caller chooses another limit.
// Clients put a deadline on every call (a stream's calls included) and
// send keepalive pings, so a dead or hung server is an error within the
// deadline, never a hang.
package service
