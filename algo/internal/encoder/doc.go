// Package encoder is the input stage of the algorithms' networks, chosen
// by their configs' `encoder` key: "mlp" feeds the observation vector to a
// multi-layer perceptron; "minatar" and "nature" feed an image
// observation (a Box of shape [height, width, channels]) through nn's
// convolution presets first, "impala" through IMPALA's residual stages
// (nn.ImpalaStages) and a ReLU. DQN's Q-network and the on-policy actor and
// critic build their networks here, so the names, the checks and the one
// place where images change layout are shared.
package encoder
