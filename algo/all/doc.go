// Package all is the list of algorithms herd's CLI knows (Specs, Lookup)
// and `herd bench learn` (BenchLearn, WriteLearnMarkdown), which trains
// (config, seed) pairs one after another and tabulates the final return
// (mean of the last 100 episodes), wall seconds and steps/s.
//
// It is the only package that imports every algo/<name>; the on-policy list
// lives in all.go, the off-policy one in offpolicy.go.
package all
