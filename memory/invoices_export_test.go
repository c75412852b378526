package memory

// SetFault sets the invoice store's fault hook (see Invoices.fault).
func (s *Invoices) SetFault(f func(op string, applied bool) error) { s.fault = f }
