"""DP nearest class mean (docs/frontier.md): the Gaussian mechanism on class sums of the encoder's embeddings."""
