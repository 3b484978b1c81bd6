"""Socket plumbing shared by the broker's server connections and its own client."""
