print("keyseal-bench")
