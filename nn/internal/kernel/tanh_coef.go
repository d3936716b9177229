package kernel

// tanh coefficients: x·P(x²)/Q(x²), the [11/12] Padé approximant of tanh
// (Lambert's continued fraction), normalised so P₀ = Q₀ = 1. Generated in
// float64 from the exact rational coefficients; the assembly holds the same
// values in its tp*/tq* tables.
const (
	tanhP0 = 1.0
	tanhP1 = 0.14492753623188406
	tanhP2 = 0.004968944099378882
	tanhP3 = 5.8116305255893354e-05
	tanhP4 = 2.374032077446624e-07
	tanhP5 = 2.466526833710778e-10
	tanhQ0 = 1.0
	tanhQ1 = 0.4782608695652174
	tanhQ2 = 0.031055900621118012
	tanhQ3 = 0.0006102212051868803
	tanhQ4 = 4.273257739403923e-06
	tanhQ5 = 9.496128309786497e-09
	tanhQ6 = 3.1622138893727926e-12
)
