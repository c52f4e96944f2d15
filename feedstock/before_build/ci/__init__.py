"""CI generation: groups the variant matrix into jobs, writes .ci_support/ and the GitHub Actions
workflow (rerender). Uses render and the top-level modules; nothing here imports checks or maintain."""
