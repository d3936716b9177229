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

// resultInfo is the registration info in which a learner leaves err's
// exit status for its controller: "<status> <message>".
func resultInfo(err error) []byte {
	info := strconv.Itoa(ExitStatus(err))
	if err != nil {
		info += " " + err.Error()
	}
	return []byte(info)
}

// parseResult reads resultInfo's registration info back: nil for a
// completed run, a *LearnerError otherwise.
func parseResult(info []byte) error {
	code, msg, _ := strings.Cut(string(info), " ")
	status, err := strconv.Atoi(code)
	if err != nil {
		return &LearnerError{Status: ExitFailed, Message: fmt.Sprintf("unreadable result %q", info)}
	}
	if status == ExitOK {
		return nil
	}
	return &LearnerError{Status: status, Message: msg}
}
