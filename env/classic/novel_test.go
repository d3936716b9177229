package classic

import "testing"

// TestNoVelMasksVelocities steps the full and the masked envs side by side
// from one seed: the masked observation is the full one with the velocity
// entries zero, and the dynamics, rewards and ends are the same.
func TestNoVelMasksVelocities(t *testing.T) {
	cp, cpNV := NewCartPole(CartPoleConfig{}), NewCartPole(CartPoleConfig{NoVel: true})
	pd, pdNV := NewPendulum(PendulumConfig{}), NewPendulum(PendulumConfig{NoVel: true})
	check := func(name string, full, masked []float32, vel []int) {
		t.Helper()
		isVel := map[int]bool{}
		for _, i := range vel {
			isVel[i] = true
		}
		for i := range full {
			want := full[i]
			if isVel[i] {
				want = 0
				if full[i] == 0 {
					t.Fatalf("%s: velocity %d is 0 in the full observation too; the test cannot tell", name, i)
				}
			}
			if masked[i] != want {
				t.Fatalf("%s: masked obs %v, full %v", name, masked, full)
			}
		}
	}
	a, _, _ := cp.Reset(3)
	b, _, _ := cpNV.Reset(3)
	check("CartPole reset", a, b, []int{1, 3})
	for s := range 20 {
		act := []float32{float32(s % 2)}
		o1, r1, te1, tr1, _, err1 := cp.Step(act)
		o2, r2, te2, tr2, _, err2 := cpNV.Step(act)
		if err1 != nil || err2 != nil || r1 != r2 || te1 != te2 || tr1 != tr2 {
			t.Fatalf("CartPole step %d differs: %v %v %v %v / %v %v %v %v", s, r1, te1, tr1, err1, r2, te2, tr2, err2)
		}
		check("CartPole", o1, o2, []int{1, 3})
		if te1 {
			break
		}
	}
	a, _, _ = pd.Reset(5)
	b, _, _ = pdNV.Reset(5)
	check("Pendulum reset", a, b, []int{2})
	for range 20 {
		act := []float32{1.5}
		o1, r1, _, _, _, _ := pd.Step(act)
		o2, r2, _, _, _, _ := pdNV.Step(act)
		if r1 != r2 {
			t.Fatalf("Pendulum rewards differ: %v %v", r1, r2)
		}
		check("Pendulum", o1, o2, []int{2})
	}
}
