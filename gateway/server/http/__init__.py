"""HTTP plumbing every surface shares: the front middleware, origins and CORS, authentication, request
bodies, compression, connection limits, error answers, sending, and the version header. Imports no surface."""
