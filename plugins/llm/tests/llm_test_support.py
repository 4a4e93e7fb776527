"""Constants shared by the rgym-llm tests."""

from rgym_llm.prices import Price, PriceTable

KEY = "sk-test-DO-NOT-LEAK-4242"
PRICES = PriceTable({"test-model": Price(input=2.0, output=10.0),
                     "claude-test": Price(input=3.0, output=15.0)})
