"""The frontier (docs/frontier.md): test utility against ε for every mechanism, chosen on validation, and the recommendation."""
