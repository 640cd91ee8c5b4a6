"""Real-model checks: SmolLM2-135M-Instruct served by llama-cpp-python on 127.0.0.1."""
