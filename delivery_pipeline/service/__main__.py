from delivery_pipeline.service.app import main

if __name__ == "__main__":
    main()
