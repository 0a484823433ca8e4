"""swzc's use of an LLM as a proposer of block swizzles: the prompt, the client, the restriction of replies."""
