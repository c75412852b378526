package faultsim

// planWeather draws which days are stormy (faults injected), calm (none:
// two in a row, after which the strict checks run) and which are a
// processor outage.
func (s *Sim) planWeather() {
	days, seed := s.opts.Days, s.opts.Seed
	w := make([]dayKind, days)
	outStart, outLen := -1, 0
	if days >= 45 && !s.opts.without(Outages) && draw(seed, "outage") < 0.6 {
		outLen = 8 + pick(seed, 5, "outage length")
		outStart = 15 + pick(seed, days-outLen-25, "outage start")
	}
	inOutage := func(d int) bool { return d >= outStart && d < outStart+outLen }
	for d := 0; d < days; {
		if inOutage(d) {
			w[d] = outage
			d++
			continue
		}
		for n := 2 + pick(seed, 4, "streak", d); n > 0 && d < days && !inOutage(d); n-- {
			w[d] = stormy
			d++
		}
		if d+1 < days && !inOutage(d) && !inOutage(d+1) {
			w[d], w[d+1] = calm, calmCheck
			d += 2
		}
	}
	if days >= 4 && !inOutage(days-2) && !inOutage(days-1) {
		w[days-2], w[days-1] = calm, calmCheck
		if w[days-3] == calm {
			w[days-3] = stormy
		}
	}
	s.planAbandoned(w)
	s.weather = w
}
