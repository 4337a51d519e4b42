"""The table's listings: `describe` (DESCRIBE STATE, TRANSACTION LOG), `history`, `files`,
`component_sizes`. Layer: after maintenance/, before cluster/."""
