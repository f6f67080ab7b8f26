"""``vigil data``: fetch (ccxt), import (Binance archive files) and check recorded data dirs."""
