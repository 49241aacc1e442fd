package agents

// flushing reports whether a rebuild of the project runs now.
func (r *Registry) flushing(projectID int64) bool {
	p := r.project(projectID, false)
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.flushing
}

// pending returns how many agent keys' changes wait for the next rebuild.
func (r *Registry) pending(projectID int64) int {
	p := r.project(projectID, false)
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pending)
}
