// Package exitguard lets a command's signal handling wait, before it exits
// at once on a second Ctrl-C, for a step that must not be cut in half: a
// run directory's commit, which moves the new run's files in place of an
// earlier run's. The Guard travels in the command's context (With), the
// step holds it (Hold), and the signal handler takes it (Wait) before
// os.Exit.
package exitguard
