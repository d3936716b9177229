package classic

// An independent reference for the dynamics: Gymnasium's published
// equations evaluated in 160-bit arithmetic (math/big, with sin and cos from
// their Taylor series), from the same float64 inputs. It shares no code
// with the envs, so agreement to 1e-12 means the float64 ports compute the
// published equations, in any order of rounding Gymnasium might use.

import (
	"math"
	"math/big"
)

const refPrec = 160 // ≈48 digits: far beyond float64, and fast enough for -race

// π to 110 digits.
const piDigits = "3.14159265358979323846264338327950288419716939937510582097494459230781640628620899862803482534211706798214808651"

type bf = *big.Float

func num(x float64) bf { return new(big.Float).SetPrec(refPrec).SetFloat64(x) }
func add(a, b bf) bf   { return new(big.Float).SetPrec(refPrec).Add(a, b) }
func sub(a, b bf) bf   { return new(big.Float).SetPrec(refPrec).Sub(a, b) }
func mul(a, b bf) bf   { return new(big.Float).SetPrec(refPrec).Mul(a, b) }
func quo(a, b bf) bf   { return new(big.Float).SetPrec(refPrec).Quo(a, b) }
func neg(a bf) bf      { return new(big.Float).SetPrec(refPrec).Neg(a) }
func sq(a bf) bf       { return mul(a, a) }
func f64(a bf) float64 { x, _ := a.Float64(); return x }
func lt(a, b bf) bool  { return a.Cmp(b) < 0 }
func gt(a, b bf) bool  { return a.Cmp(b) > 0 }
func bmin(a, b bf) bf {
	if lt(b, a) {
		return b
	}
	return a
}
func bmax(a, b bf) bf {
	if gt(b, a) {
		return b
	}
	return a
}
func clip(x, lo, hi bf) bf { return bmin(bmax(x, lo), hi) }

// refPi is parsed once; it is never modified (bigPi hands out copies).
var refPi = func() bf {
	p, _, err := big.ParseFloat(piDigits, 10, refPrec, big.ToNearestEven)
	if err != nil {
		panic("reference π: " + err.Error())
	}
	return p
}()

func bigPi() bf { return new(big.Float).SetPrec(refPrec).Set(refPi) }

// reduce returns x − 2πk in [−π, π].
func reduce(x bf) bf {
	twoPi := mul(num(2), bigPi())
	k := quo(x, twoPi)
	ki, _ := k.Int(nil)
	r := sub(x, mul(new(big.Float).SetPrec(refPrec).SetInt(ki), twoPi))
	for gt(r, bigPi()) {
		r = sub(r, twoPi)
	}
	for lt(r, neg(bigPi())) {
		r = add(r, twoPi)
	}
	return r
}

// series sums x^start/start! − x^(start+2)/(start+2)! + … (sin: start 1,
// cos: start 0) until the terms vanish at this precision.
func series(x bf, start int) bf {
	x = reduce(x)
	term := num(1)
	for i := 1; i <= start; i++ {
		term = quo(mul(term, x), num(float64(i)))
	}
	sum := new(big.Float).SetPrec(refPrec).Set(term)
	x2 := sq(x)
	eps := new(big.Float).SetPrec(refPrec).SetMantExp(num(1), -refPrec)
	for n := start + 1; ; n += 2 {
		term = neg(quo(mul(term, x2), num(float64(n*(n+1)))))
		sum = add(sum, term)
		if new(big.Float).Abs(term).Cmp(eps) < 0 {
			return sum
		}
	}
}

func bsin(x bf) bf { return series(x, 1) }
func bcos(x bf) bf { return series(x, 0) }

// refCartPole is the cart-pole step (Barto, Sutton & Anderson; Florian
// 2005) with explicit Euler; it returns the next state and terminated.
func refCartPole(s [4]float64, action int) ([4]float64, bool) {
	g, mc, mp, l, tau := num(9.8), num(1.0), num(0.1), num(0.5), num(0.02)
	m := add(mp, mc)
	x, xd, th, thd := num(s[0]), num(s[1]), num(s[2]), num(s[3])
	f := num(-10)
	if action == 1 {
		f = num(10)
	}
	c, sn := bcos(th), bsin(th)
	temp := quo(add(f, mul(mul(mp, l), mul(sq(thd), sn))), m)
	thacc := quo(sub(mul(g, sn), mul(c, temp)), mul(l, sub(quo(num(4), num(3)), quo(mul(mp, sq(c)), m))))
	xacc := sub(temp, quo(mul(mul(mp, l), mul(thacc, c)), m))
	nx := add(x, mul(tau, xd))
	nxd := add(xd, mul(tau, xacc))
	nth := add(th, mul(tau, thd))
	nthd := add(thd, mul(tau, thacc))
	xt, tht := 2.4, 0.20943951023931953 // Python's 12*2*math.pi/360
	term := lt(nx, num(-xt)) || gt(nx, num(xt)) || lt(nth, num(-tht)) || gt(nth, num(tht))
	return [4]float64{f64(nx), f64(nxd), f64(nth), f64(nthd)}, term
}

// refPendulum returns the next [θ, θ̇] and the reward.
func refPendulum(s [2]float64, u float64, gravity float64) ([2]float64, float64) {
	th, thd := num(s[0]), num(s[1])
	uu := clip(num(u), num(-2), num(2))
	// ((θ + π) mod 2π) − π, floored modulo.
	twoPi := mul(num(2), bigPi())
	y := add(th, bigPi())
	k, _ := quo(y, twoPi).Int(nil)
	kf := new(big.Float).SetPrec(refPrec).SetInt(k)
	if y.Sign() < 0 && kf.Cmp(quo(y, twoPi)) != 0 {
		kf = sub(kf, num(1)) // Int truncates toward zero; floor wants one less
	}
	an := sub(sub(y, mul(kf, twoPi)), bigPi())
	cost := add(add(sq(an), mul(num(0.1), sq(thd))), mul(num(0.001), sq(uu)))
	g := num(gravity)
	acc := add(mul(quo(mul(num(3), g), num(2)), bsin(th)), mul(num(3), uu))
	nthd := clip(add(thd, mul(acc, num(0.05))), num(-8), num(8))
	nth := add(th, mul(nthd, num(0.05)))
	return [2]float64{f64(nth), f64(nthd)}, -f64(cost)
}

// refMountainCar returns the next [p, v] and terminated.
func refMountainCar(s [2]float64, action int) ([2]float64, bool) {
	p, v := num(s[0]), num(s[1])
	v = add(v, add(mul(num(float64(action-1)), num(0.001)), mul(bcos(mul(num(3), p)), num(-0.0025))))
	v = clip(v, num(-0.07), num(0.07))
	p = clip(add(p, v), num(-1.2), num(0.6))
	if p.Cmp(num(-1.2)) == 0 && v.Sign() < 0 {
		v = num(0)
	}
	term := p.Cmp(num(0.5)) >= 0 && v.Sign() >= 0
	return [2]float64{f64(p), f64(v)}, term
}

// refMountainCarContinuous returns the next [p, v] (rounded to float32, as
// Gymnasium stores them), the reward and terminated.
func refMountainCarContinuous(s [2]float64, a float64) ([2]float64, float64, bool) {
	p, v := num(s[0]), num(s[1])
	force := clip(num(a), num(-1), num(1))
	v = add(v, sub(mul(force, num(0.0015)), mul(num(0.0025), bcos(mul(num(3), p)))))
	v = clip(v, num(-0.07), num(0.07))
	p = clip(add(p, v), num(-1.2), num(0.6))
	if p.Cmp(num(-1.2)) == 0 && v.Sign() < 0 {
		v = num(0)
	}
	term := p.Cmp(num(0.45)) >= 0 && v.Sign() >= 0
	r := neg(mul(sq(num(a)), num(0.1)))
	if term {
		r = add(r, num(100))
	}
	return [2]float64{float64(float32(f64(p))), float64(float32(f64(v)))}, f64(r), term
}

// refAcrobotDeriv is the Acrobot's equations of motion (Sutton & Barto's
// book; nips drops the θ̇₁² term of θ̈₂).
func refAcrobotDeriv(s [4]bf, tau bf, nips bool) [4]bf {
	m1, m2, l1, lc1, lc2, i1, i2, g := num(1), num(1), num(1), num(0.5), num(0.5), num(1), num(1), num(9.8)
	t1, t2, d1dot, d2dot := s[0], s[1], s[2], s[3]
	halfPi := quo(bigPi(), num(2))
	c2, s2 := bcos(t2), bsin(t2)
	d1 := add(add(add(mul(m1, sq(lc1)), mul(m2, add(add(sq(l1), sq(lc2)), mul(mul(num(2), mul(l1, lc2)), c2)))), i1), i2)
	d2 := add(mul(m2, add(sq(lc2), mul(mul(l1, lc2), c2))), i2)
	phi2 := mul(mul(mul(m2, lc2), g), bcos(sub(add(t1, t2), halfPi)))
	phi1 := add(add(sub(neg(mul(mul(mul(m2, l1), lc2), mul(sq(d2dot), s2))),
		mul(mul(num(2), mul(mul(m2, l1), lc2)), mul(mul(d2dot, d1dot), s2))),
		mul(mul(add(mul(m1, lc1), mul(m2, l1)), g), bcos(sub(t1, halfPi)))), phi2)
	den := sub(add(mul(m2, sq(lc2)), i2), quo(sq(d2), d1))
	numer := sub(add(tau, mul(quo(d2, d1), phi1)), phi2)
	if !nips {
		numer = sub(numer, mul(mul(mul(m2, l1), lc2), mul(sq(d1dot), s2)))
	}
	dd2 := quo(numer, den)
	dd1 := neg(quo(add(mul(d2, dd2), phi1), d1))
	return [4]bf{d1dot, d2dot, dd1, dd2}
}

// refAcrobot is one RK4 step of 0.2 s, angle wrapping, velocity clipping;
// it returns the next state and terminated.
func refAcrobot(s [4]float64, action int, nips bool) ([4]float64, bool) {
	tau := num([]float64{-1, 0, 1}[action])
	var y0 [4]bf
	for i := range y0 {
		y0[i] = num(s[i])
	}
	dt := num(0.2)
	half := quo(dt, num(2))
	step := func(k [4]bf, h bf) [4]bf {
		var y [4]bf
		for i := range y {
			y[i] = add(y0[i], mul(h, k[i]))
		}
		return y
	}
	k1 := refAcrobotDeriv(y0, tau, nips)
	k2 := refAcrobotDeriv(step(k1, half), tau, nips)
	k3 := refAcrobotDeriv(step(k2, half), tau, nips)
	k4 := refAcrobotDeriv(step(k3, dt), tau, nips)
	var ns [4]bf
	for i := range ns {
		sum := add(add(add(k1[i], mul(num(2), k2[i])), mul(num(2), k3[i])), k4[i])
		ns[i] = add(y0[i], mul(quo(dt, num(6)), sum))
	}
	// wrap works on float64 values in Gymnasium; wrapping the exact value
	// and rounding agree to far below 1e-12.
	pi := bigPi()
	twoPi := mul(num(2), pi)
	for i := 0; i < 2; i++ {
		for gt(ns[i], pi) {
			ns[i] = sub(ns[i], twoPi)
		}
		for lt(ns[i], neg(pi)) {
			ns[i] = add(ns[i], twoPi)
		}
	}
	v1, v2 := mul(num(4), pi), mul(num(9), pi)
	ns[2] = clip(ns[2], neg(v1), v1)
	ns[3] = clip(ns[3], neg(v2), v2)
	term := gt(sub(neg(bcos(ns[0])), bcos(add(ns[1], ns[0]))), num(1))
	return [4]float64{f64(ns[0]), f64(ns[1]), f64(ns[2]), f64(ns[3])}, term
}

// margin reports whether a and b differ by more than tol relative to
// max(1, |b|).
func far(a, b, tol float64) bool {
	return math.Abs(a-b) > tol*math.Max(1, math.Abs(b))
}
