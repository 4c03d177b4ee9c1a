from delivery_pipeline.sandbox.cli import main

if __name__ == "__main__":
    main()
