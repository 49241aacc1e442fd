package postgres

// Versions is how many schema steps this build knows.
var Versions = len(migrations)
