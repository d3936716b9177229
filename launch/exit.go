package launch

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Exit statuses of herd's commands and of the worker processes a launcher
// supervises.
const (
	// ExitOK: the command did everything it promised.
	ExitOK = 0
	// ExitFailed: any failure, with the reason on stderr.
	ExitFailed = 1
	// ExitInterrupted: stopped by Ctrl-C or SIGTERM, everything it had to
	// save saved (128 + SIGINT, as shells report a Ctrl-C).
	ExitInterrupted = 130
)

// ExitStatus maps a command's error to its exit status: a cancellation
// that reached the top unmixed with any failure means a clean
// interruption. Commands must not wrap context.Canceled into an error that
// also reports something unsaved (algo.TrainRun guarantees this for
// training); they format such a failure with %v.
func ExitStatus(err error) int {
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, context.Canceled):
		return ExitInterrupted
	}
	return ExitFailed
}

// LearnerError is the outcome of a learner that did not complete its run,
// as a controller that does not own its process reads it from the
// learner's result registration. It unwraps to context.Canceled when the
// learner was interrupted and saved its run, so that ExitStatus gives
// ExitInterrupted.
type LearnerError struct {
	// Status is the learner's exit status; -1 when it left none (killed,
	// or its machine lost).
	Status int
	// Message is the learner's error message.
	Message string
}

func (e *LearnerError) Error() string {
	switch e.Status {
	case -1:
		return "launch: the learner is gone without a result (killed, or its machine lost): the run is not finished"
	case ExitInterrupted:
		return fmt.Sprintf("launch: the learner was interrupted (%s)", e.Message)
	}
	return fmt.Sprintf("launch: the learner failed (exit status %d): %s", e.Status, e.Message)
}

// Unwrap gives context.Canceled for an interrupted learner that saved its
// run, nothing otherwise.
func (e *LearnerError) Unwrap() error {
	if e.Status == ExitInterrupted {
		return context.Canceled
	}
	return nil
}

// endMark is the run's end mark (transport.NATS.EndRun) a learner leaves:
// "<exit status> <message>". The controller of a --no-workers run takes
// its exit status from it; a worker started after the end prints it.
func endMark(err error) string {
	if err == nil {
		return strconv.Itoa(ExitOK) + " completed"
	}
	return strconv.Itoa(ExitStatus(err)) + " " + err.Error()
}

// parseEndMark splits a learner's end mark; ok is false for any other
// mark (the controller's own, left where no learner marked the run).
func parseEndMark(mark string) (code int, msg string, ok bool) {
	c, msg, _ := strings.Cut(mark, " ")
	code, err := strconv.Atoi(c)
	return code, msg, err == nil
}

// describeEnd puts an end mark in words.
func describeEnd(mark string) string {
	switch code, msg, ok := parseEndMark(mark); {
	case !ok:
		return mark
	case code == ExitOK:
		return msg
	default:
		return fmt.Sprintf("the learner's exit status %d: %s", code, msg)
	}
}

// controllerEndMark is the end mark a controller leaves where the learner
// left none (killed, or never started).
const controllerEndMark = "ended by the controller, not by a learner"

// learnerResult reads a learner's end mark back: nil for a completed run,
// a *LearnerError otherwise (Status −1: no learner's mark, the learner was
// killed or its machine lost).
func learnerResult(mark string, ended bool) error {
	code, msg, ok := parseEndMark(mark)
	if !ended || !ok {
		return &LearnerError{Status: -1}
	}
	if code == ExitOK {
		return nil
	}
	return &LearnerError{Status: code, Message: msg}
}
