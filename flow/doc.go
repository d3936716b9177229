// Package flow builds reinforcement-learning algorithms as dataflow plans.
package flow
