raise ImportError("this pack is broken on purpose")
