// Package all is the list of algorithms herd's CLI knows (Specs, Lookup).
//
// It is the only package that imports every algo/<name>; the on-policy list
// lives in all.go, the off-policy one in offpolicy.go. It imports no
// executor: herd bench learn (package bench) and the CLI hand the specs to
// run's executors.
package all
